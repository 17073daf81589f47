"""Jobs: work the schedulers carry on until it ends, whatever becomes of the command that
asked for it: the drain of a host (``berth host drain``) and the applying of a rebalance plan
(``berth rebalance apply``).

- :mod:`scheduler.moves.jobs.policy`: what a job does next, from its rows alone;
- :mod:`scheduler.moves.jobs.runner`: the schedulers' periodic work that claims jobs by lease and
  carries out what the policy decides, each write a compare-and-set;
- :mod:`scheduler.moves.jobs.api`: the RPC methods (admin API 1.3) that start, show and stop jobs.
"""

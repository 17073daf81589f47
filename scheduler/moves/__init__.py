"""Moving instances that exist: resize, migration, live migration, evacuation, drains and
rebalance plans, each module in its layer (doc/source/contributor/architecture.md):

- ``rebalance/``, ``goals/``: the rebalance algorithms and goals (policy: no I/O);
- ``planner``, ``applier``: a move's destination, and the move recorded, cast step by step and
  ended (planning);
- ``api``, ``rebalance_api``, ``fleet_snapshot``, ``expiry``, ``jobs/``: the endpoints, the fleet
  as the algorithms read it, moves that wait or never finish, and drains and plans carried on
  as jobs (services).
"""

"""Scaling groups: the policy that sets a group's desired member count, and the controller,
endpoint and service that apply it.

The policy is Kubernetes' HorizontalPodAutoscaler algorithm, members for pods, and is pure
(no I/O, no clock): ``spec`` (a group's spec and the what-if input), ``replicas`` (what one
metric asks for), ``behavior`` (stabilization and rate limits), ``decide`` (one sync's
decision), ``members`` (which members a scale-down removes, what a new member's request
is), ``settled`` and ``status``.

Around it: ``controller`` (each sync: reads the groups, runs the policy, writes and casts
what it decided), ``service`` (the controller's thread, settings and metric sources),
``api`` (the groups' RPC endpoint) and ``metrics`` (the syncs' Prometheus collector).
"""

"""Autoscaling groups: the policy that sets a group's desired member count.

Kubernetes' HorizontalPodAutoscaler algorithm, members for pods: ``spec`` (a group's
spec and the what-if input), ``replicas`` (what one metric asks for), ``behavior``
(stabilization and rate limits), ``decide`` (one sync's decision), ``members`` (which
members a scale-down removes, what a new member's request is). No I/O, no clock: the
controller that reads and writes groups is scheduler.scaling_controller.
"""

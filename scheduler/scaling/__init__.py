"""Autoscaling groups: the policy that sets a group's desired member count.

Kubernetes' HorizontalPodAutoscaler algorithm, members for pods: ``spec`` (a group's
spec and the what-if input), ``replicas`` (what one metric asks for), ``behavior``
(stabilization and rate limits), ``decide`` (one sync's decision). No I/O, no clock.
"""

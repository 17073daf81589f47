"""The status page a scheduler serves beside its metrics: the fleet as a heat map, the
instances by state, the latest refusals, the scaling groups over the last hour and the
dead letters (``/`` and ``/status.json`` on the ``[prometheus]`` endpoint)."""

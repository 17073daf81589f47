"""``berth simulate``: a workload replayed against a fleet with one or more policies, through
the daemon's own host table, filters, weighers and selection, on a simulated clock."""

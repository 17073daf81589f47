"""Console entry points of the compute agent."""

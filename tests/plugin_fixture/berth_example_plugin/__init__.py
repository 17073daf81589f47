"""An example third-party Berth plugin: a filter, a weigher, a compute driver and a rebalance goal,
each with its own option."""

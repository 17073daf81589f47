"""An example third-party Berth plugin: a filter, a weigher and a compute driver, each with its own
option."""

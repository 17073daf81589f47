"""An example third-party Berth plugin: a filter and a weigher, each with its own option."""

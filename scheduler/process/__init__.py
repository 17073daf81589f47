"""What every Berth program does, the scheduler's, the agent's and the command line's alike:
read and check its options and set up its log (startup), then run its services until it is
signalled (running)."""

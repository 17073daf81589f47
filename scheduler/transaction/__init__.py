"""One batch's transaction: the unit of work that commits it, the outbox of
what is sent after the commit, and the undo of what the batch changed in memory."""

"""Scheduling as a plan the planner decides and the applier commits."""

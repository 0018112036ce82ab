"""Candidate enumeration, feasibility rules with reasons, role scoring, the planner."""

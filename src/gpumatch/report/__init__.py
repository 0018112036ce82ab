"""Rendering: terminal tables, JSON and CSV export, HTML. Computes nothing new."""

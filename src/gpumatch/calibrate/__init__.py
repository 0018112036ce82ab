"""Predicted vs measured: fits Calibration values from stored runs."""

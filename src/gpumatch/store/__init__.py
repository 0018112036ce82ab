"""The results database (SQLite by default): migrations, runs, results, samples, failures, calibrations."""

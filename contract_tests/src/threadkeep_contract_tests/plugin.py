"""pytest plugin entry point (markers, options, Hypothesis profiles)."""

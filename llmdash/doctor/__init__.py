"""`llmdash doctor`: which panels, annotations and rules will stay empty on a given fleet, and why."""

"""Multiple choice (SWAG): run_multiple_choice's task and its records."""

"""pytest configuration: the helpers live in tests/helpers.py."""

"""Tests of `workers.igtree`."""

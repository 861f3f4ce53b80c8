"""Tests of `workers.training`."""

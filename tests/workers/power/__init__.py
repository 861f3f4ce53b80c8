"""Tests of `workers.power`."""

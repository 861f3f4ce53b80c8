"""The science checks a run's results are judged by: the paper's claims, the demo's targets, the token-tree targets."""

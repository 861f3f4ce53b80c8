"""The accelerator worker: `runner` is its core (one verifier loaded once, jobs run and measured, pure Python and
torch), `actor` the Ray actor that wraps it. Light on import: its modules pull torch and Ray."""

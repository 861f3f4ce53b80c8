"""Replay: a greedy cell's rounds computed exactly from its prompt's stored reference, on a CPU worker, without the
verifier. `verifier` is the stand-in verifier (`ReferenceVerifier`, `replay_generate`: the decoding's own rounds
against the reference's tokens); `batch` runs a batch of replay jobs and checks a timed generation's rounds against
its replay; `task` is the Ray task the driver sends batches to. Scheduling is the driver's
(`orchestrator.run.scheduler`); the predicted time of the rounds is the round-cost table's (`workers.decoding.costmodel`).

Kept light: importing this package imports no torch and no Ray (its modules do).
"""

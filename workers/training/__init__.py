"""Training the artifacts drafts need: instance bases, verifier labels, distilled instance bases, datastores.

Modules: `ibase` (the pure training: corpus -> instance base on disk, `IBaseRequest` in, `IBaseInfo` out),
`instances` (corpus -> token file -> windowed instances), `labels` (the verifier's greedy next tokens of a corpus),
`distill` (an instance base from those labels), `datastore` (REST's suffix-array datastore), `artifacts` (the
registry of artifact kinds), `builders` (each CPU artifact kind's pure builder), `workdir` (the locked work
folders), `transfer` (artifact copies between Ray nodes) and `ray_tasks` (the Ray task adapters over the rest).

Nothing is imported here: importing the package must not import Ray.
"""

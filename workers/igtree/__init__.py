"""IGTree (TiMBL `-a1`) over fixed windows of token ids: our numpy engine and TiMBL itself, same interface.

The rules, checked against TiMBL 6.10 (see docs/igtree.md): features ordered by descending gain ratio, exact ties
to the lower position; a node's label is its most frequent class, ties to the class more frequent in the whole
training set, then to the class that appeared first *as a class* in training order; every childless node whose
label equals its parent's is pruned bottom-up; a query returns the label of the deepest matching node (the
root's label when the first value is unseen).

Modules: `counting` (instances -> counted rows, shard merging), `build` (statistics, trie, pruning: one piece
of the tree at a time), `tree` (the engine: `IGTree`), `fileformat` (the .igtree file), `timbl` (TiMBL behind
the same interface), `partitioned` (the out-of-core build from a token file, in bounded memory: its memory
`plan`, its five `stages` and their task calls, `spill`).

Example:
    >>> tree = IGTree.fit(contexts, targets)          # contexts (n, 4) int, targets (n,) int
    >>> tree.predict([1, 415, 2936, 302])
    28725
"""

from workers.igtree.build import ORDERS, feature_order, feature_weights
from workers.igtree.counting import PAD, InstanceCounts, count_instances, merge_counts
from workers.igtree.fileformat import FORMAT_VERSION, MAGIC
from workers.igtree.timbl import TimblIGTree, write_timbl_instances
from workers.igtree.tree import IGTree

__all__ = [
    "FORMAT_VERSION",
    "MAGIC",
    "ORDERS",
    "PAD",
    "IGTree",
    "InstanceCounts",
    "TimblIGTree",
    "count_instances",
    "feature_order",
    "feature_weights",
    "merge_counts",
    "write_timbl_instances",
]

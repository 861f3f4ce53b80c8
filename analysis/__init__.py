"""Analysis: what the stored rows say. Summaries with their intervals over prompts, the prediction error of replayed
cells, verdicts (`analysis.checks`), the learning curve, the columns every table shares and the comparison with the
seed paper. Pandas and numpy over the frames `storage` reads; no SQL here, and no science (that is `workers`)."""

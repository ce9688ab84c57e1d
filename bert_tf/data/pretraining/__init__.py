"""Pretraining records: their layouts and features (`record_layout`), create_pretraining_data's
generation of them (`generate` the original's default mode, `streaming` in bounded windows,
`beam` on Apache Beam) and token counts of written files (`record_stats`). Imports nothing:
create_pretraining_data reads its modules without TensorFlow.
"""

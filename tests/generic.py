"""The package's generic tests of the decomposition, the readout's increases, the interventions
and the passes that share a prefix, gathered once: a family's test module imports them all
(`from tests.generic import *`) and its own `small` fixture runs them on its models."""
from tests.test_attribution import (  # noqa: F401
    dec,
    test_chunking_changes_nothing,
    test_heads_position_increase_equals_naive_at_the_chosen_positions,
    test_layer_head_increase_equals_naive,
    test_locate_scores_given_targets,
    test_locate_scores_layers_and_is_independent_of_batch_size,
    test_neuron_increase_equals_naive,
    test_position_increase_equals_naive,
    test_projection_is_linear,
    test_projection_of_final_residual_is_the_models_logits,
)
from tests.test_decompose import (  # noqa: F401
    full,
    hf,
    test_attention_rows_match_models_attentions,
    test_attention_sums_are_earlier_attention_outputs,
    test_batched_equals_one_prompt_at_a_time,
    test_final_scale_is_the_norm_the_model_used,
    test_heads_plus_bias_equal_attention_output,
    test_layer_inputs_match_models_hidden_states,
    test_neurons_sum_to_ffn_output,
    test_position_terms_sum_to_each_head,
    test_residual_stream_is_embeddings_plus_every_layer,
    test_the_key_input_is_what_the_key_projection_reads,
)
from tests.test_interventions import (  # noqa: F401
    test_ablation_removes_exactly_the_heads_contribution,
    test_balancing_divides_label_weights_by_class_count,
    test_balancing_equal_classes_changes_nothing,
    test_identity_rotation_changes_nothing,
    test_interventions_work_in_a_batch_as_one_by_one,
    test_mean_ablation_sets_z_to_the_dataset_mean,
    test_model_is_unchanged_afterwards,
)
from tests.test_prefix import test_a_resumed_pass_is_the_full_pass, test_position_free_keys_resumed  # noqa: F401

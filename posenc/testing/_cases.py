"""Published configs the rotary conformance suite runs on, with where each was read.

``PUBLISHED``: five configs' rotary keys and sizes, as (model id, where its values were checked, the config as posenc
reads it). The values are those of the book's ``posenc_book.zoo.PUBLISHED_CONFIGS`` (tests/test_conformance.py checks
that they stay equal), with the configuration class's defaults added where the published file leaves keys to it
(Gemma 3's sparse ``text_config``). Qwen2.5-VL's M-RoPE config is left out: its layers rotate on three axes (see
:func:`posenc.testing.assert_mrope_axes_match`). ``CORPUS``: whole ``config.json`` files, stored in
posenc/testing/configs.
"""

from __future__ import annotations

from typing import Any

PUBLISHED: tuple[tuple[str, str, dict[str, Any]], ...] = (
    (
        "meta-llama/Llama-3.1-8B-Instruct",
        (
            "sizes, rope_theta and use_scaled_rope: Meta's llama-models, models/sku_list.py "
            "(llama3_1_instruct_models, commit 8c88b8c); the scaling's 8, 1, 4 and 8192: models/llama3/model.py "
            "(apply_scaling, commit a9c89c4); 131072 and the rope_scaling keys: transformers' "
            "convert_llama_weights_to_hf.py (CONTEXT_LENGTH_FOR_VERSION)"
        ),
        {
            "model_type": "llama",
            "hidden_size": 4096,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "num_hidden_layers": 32,
            "max_position_embeddings": 131072,
            "rope_theta": 500000.0,
            "rope_scaling": {
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 8192,
                "rope_type": "llama3",
            },
        },
    ),
    (
        "google/gemma-3-4b-it",
        (
            "the six keys of the text_config of the published config.json, as copies of the file quote them (found by"
            " a code search whose index does not name their repositories, so none can be cited here: these six values"
            " are the ones to recheck against the file itself); vLLM pull request 21927 lists the file as lacking "
            "sliding_window_pattern; the rest is Gemma3TextConfig's defaults in transformers 5.23 (class_defaults, "
            "checked against the class); the keys head_dim, num_attention_heads, num_key_value_heads, "
            "rope_local_base_freq, rope_theta, sliding_window_pattern are Gemma3TextConfig's defaults, added"
        ),
        {
            "model_type": "gemma3_text",
            "hidden_size": 2560,
            "intermediate_size": 10240,
            "num_hidden_layers": 34,
            "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
            "sliding_window": 1024,
            "head_dim": 256,
            "num_attention_heads": 8,
            "num_key_value_heads": 4,
            "sliding_window_pattern": 6,
            "rope_theta": 1000000.0,
            "rope_local_base_freq": 10000.0,
        },
    ),
    (
        "openai/gpt-oss-20b",
        (
            "a copy of the published config.json (jihengzhang/jihz-gpt-oss-20b, gpt-oss-20b/config.json, commit "
            "7ec8980), its rotary keys and sizes"
        ),
        {
            "model_type": "gpt_oss",
            "hidden_size": 2880,
            "head_dim": 64,
            "num_attention_heads": 64,
            "num_key_value_heads": 8,
            "num_hidden_layers": 24,
            "max_position_embeddings": 131072,
            "sliding_window": 128,
            "layer_types": [
                "sliding_attention",
                "full_attention",
                "sliding_attention",
                "full_attention",
                "sliding_attention",
                "full_attention",
                "sliding_attention",
                "full_attention",
                "sliding_attention",
                "full_attention",
                "sliding_attention",
                "full_attention",
                "sliding_attention",
                "full_attention",
                "sliding_attention",
                "full_attention",
                "sliding_attention",
                "full_attention",
                "sliding_attention",
                "full_attention",
                "sliding_attention",
                "full_attention",
                "sliding_attention",
                "full_attention",
            ],
            "rope_theta": 150000,
            "rope_scaling": {
                "beta_fast": 32.0,
                "beta_slow": 1.0,
                "factor": 32.0,
                "original_max_position_embeddings": 4096,
                "rope_type": "yarn",
                "truncate": False,
            },
        },
    ),
    (
        "deepseek-ai/DeepSeek-V3",
        (
            "sizes and YaRN values: DeepSeek's repository, inference/configs/config_671B.json and ModelArgs in "
            "inference/model.py (commit 9b4e978); 163840, 128 key-value heads, rope_theta 10000 and the rope_scaling "
            "keys (mscale and mscale_all_dim 1.0, type yarn) as a copy of the published config.json writes them: the "
            "one quoted in full in vllm-project/vllm-ascend issue 206 (2025-02-28, transformers_version 4.33.1)"
        ),
        {
            "model_type": "deepseek_v3",
            "hidden_size": 7168,
            "num_attention_heads": 128,
            "num_key_value_heads": 128,
            "num_hidden_layers": 61,
            "q_lora_rank": 1536,
            "kv_lora_rank": 512,
            "qk_nope_head_dim": 128,
            "qk_rope_head_dim": 64,
            "v_head_dim": 128,
            "max_position_embeddings": 163840,
            "rope_theta": 10000,
            "rope_scaling": {
                "beta_fast": 32,
                "beta_slow": 1,
                "factor": 40,
                "mscale": 1.0,
                "mscale_all_dim": 1.0,
                "original_max_position_embeddings": 4096,
                "type": "yarn",
            },
        },
    ),
    (
        "EleutherAI/pythia-1.4b",
        (
            "sizes, context and rotary-pct 0.25: Pythia's training configuration, models/1.4B/pythia-1.4b.yml "
            "(EleutherAI/pythia, commit 4d0c901); the key names rotary_pct and rotary_emb_base and GPT-NeoX's base "
            "10000 as the published GPT-NeoX configs write them"
        ),
        {
            "model_type": "gpt_neox",
            "hidden_size": 2048,
            "num_attention_heads": 16,
            "num_hidden_layers": 24,
            "max_position_embeddings": 2048,
            "rotary_pct": 0.25,
            "rotary_emb_base": 10000,
        },
    ),
)


CORPUS: tuple[tuple[str, str, str, str, str], ...] = (
    (
        "cognitivecomputations/Dolphin3.0-R1-Mistral-24B",
        "cognitivecomputations__Dolphin3.0-R1-Mistral-24B.json",
        "gsasouza/dolphin3-mistral",
        "config.json",
        "d96260c148d2bbf8a90a34022ef3777c6e6f5a09",
    ),
    (
        "deepseek-ai/DeepSeek-V2-Lite-Chat",
        "deepseek-ai__DeepSeek-V2-Lite-Chat.json",
        "kvcache-ai/ktransformers",
        "archive/kt-sft/ktransformers/configs/model_config/config.json",
        "95009ea6856c0799e517e93cb12be5e8494bc7ce",
    ),
    (
        "ibm-granite/granite-3.1-1b-a400m-instruct",
        "ibm-granite__granite-3.1-1b-a400m-instruct.json",
        "jeremieconte/granite-3.1-1b-a400m-instruct",
        "config.json",
        "73154eec21d1b9803ca85a415ddc9cec1287a492",
    ),
    (
        "ibm-granite/granite-3b-code-instruct-128k",
        "ibm-granite__granite-3b-code-instruct-128k.json",
        "ashishn-08/granite-3b-code-instruct-128k",
        "config.json",
        "6c2060816a990f5e7f85ea034fbe17deca0b9ba3",
    ),
    (
        "meta-llama/Llama-3.2-3B-Instruct",
        "meta-llama__Llama-3.2-3B-Instruct.json",
        "Gusiion/meta-llama-Llama-3.2-3B-Instruct",
        "config.json",
        "392a143b624368100f77a3eafaa4a2468ba50a72",
    ),
    (
        "microsoft/phi-2",
        "microsoft__phi-2.json",
        "henryhmko/VLM_interpretability",
        "phi-2/config.json",
        "0df0f214241e1b09ef34823e161a485e4ec60774",
    ),
    (
        "microsoft/Phi-3-mini-128k-instruct",
        "microsoft__Phi-3-mini-128k-instruct.json",
        "ChuDinhKlopp/phi-3-mini-keyformer",
        "config.json",
        "48b6150ffee33c8875a669a7697b6eb8fe69924b",
    ),
    (
        "microsoft/Phi-3.5-mini-instruct",
        "microsoft__Phi-3.5-mini-instruct.json",
        "Anonymi1ty/Eedi---MMM",
        "config.json",
        "1ed466e3ea477c673564c049e2516273cc14adab",
    ),
    (
        "microsoft/phi-4",
        "microsoft__phi-4.json",
        "pryzmatpl/prizm-phi4",
        "config.json",
        "381727a5ee103da6c1b14ecd3d39cd09832cbcf8",
    ),
    (
        "mistralai/Devstral-Small-2507",
        "mistralai__Devstral-Small-2507.json",
        "fetchwiki/mistralai-Devstral-Small-2507",
        "config.json",
        "2074b22fb5db38af6007d5817289e29e6790f1e0",
    ),
    (
        "Qwen/Qwen3-Next-80B-A3B-Instruct",
        "Qwen__Qwen3-Next-80B-A3B-Instruct.json",
        "daniel-p-green/alain-ai-learning-platform",
        "out/research-qwen-qwen3-next-80b-a3b-instruct/sources/huggingface/config.json",
        "1b33775219c224def81d0c3c4e34d2d6630dc83d",
    ),
    (
        "zai-org/GLM-4.5",
        "zai-org__GLM-4.5.json",
        "alibaba/rtp-llm",
        "rtp_llm/test/model_test/fake_test/testdata/glm45/tokenizer/config.json",
        "4b8d39cd5cbe4eff0cf0661411e15be21ccc58b9",
    ),
)
"""Published ``config.json`` files of the repository's corpus (tests/data/published_configs, whose MANIFEST.json names
each source) that add a rotation the configs above and the class defaults lack: (checkpoint, file in
posenc/testing/configs, the public copy's repository, path and commit). The files are the corpus's, byte for byte
(tests/test_conformance.py checks their digests against the manifest, and that every rotation the corpus's readable
configs hold is in the catalogue)."""

from trainwarden.events.redact import MASK, redact, redact_text


def test_secret_keys_are_masked_but_metrics_are_not():
    out = redact({"env": {"HF_TOKEN": "abc", "WANDB_API_KEY": "k" * 40, "PATH": "/bin"}, "tokens_per_s": 1200})
    assert out == {"env": {"HF_TOKEN": MASK, "WANDB_API_KEY": MASK, "PATH": "/bin"}, "tokens_per_s": 1200}


def test_assignments_flags_urls_and_tokens_in_text():
    text = (
        "WANDB_API_KEY=abc123 python train.py --hf_token xyz --db-password=pw "
        "redis://user:pw@host:6379/0 xoxb-1234567890-abcdef max_tokens=5"
    )
    out = redact_text(text, secrets=[])
    for secret in ("abc123", "xyz", "=pw", ":pw@", "xoxb-1234567890"):
        assert secret not in out
    assert "max_tokens=5" in out


def test_argv_flag_values_are_masked():
    assert redact(["python", "--wandb_api_key", "k", "--lr", "3"]) == ["python", "--wandb_api_key", MASK, "--lr", "3"]


def test_known_secret_values_are_masked_anywhere():
    assert redact_text("log line with s3cr3tvalue inside", secrets=["s3cr3tvalue"]) == f"log line with {MASK} inside"

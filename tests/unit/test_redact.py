import pytest
from trainwarden.core.redact import MASK, MaskingFilter, env_secrets, looks_secret, redact, redact_text


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


# Each planted shape (as a trainer might print it) must lose its secret; the secret itself is the
# second element. Built by concatenation so that no scanner mistakes this file for a leak.
WANDB_V1 = "wandb_v1_" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
CLASSIC = "0123456789abcdef0123456789abcdef" + "fedcba98"
SHAPES = [
    (f"wandb: using key {WANDB_V1}", WANDB_V1),
    (f"WANDB_API_KEY={CLASSIC} python train.py", CLASSIC),
    (f"wandb.errors.AuthenticationError: API key {CLASSIC} is not valid", CLASSIC),
    (f"wandb login {CLASSIC}", CLASSIC),
    ("slack " + "xoxb-" + "1234567890-0987654321-AbCdEfGhIjKl", "xoxb-1234567890"),
    ("xoxp-" + "1234567890-0987654321-abc", "xoxp-1234567890"),
    ("app token " + "xapp-" + "1-A012345-6789-abcdef", "xapp-1-A012345"),
    ("hub " + "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123", "hf_AbCdEfGh"),
    ("aws " + "AKIA" + "IOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ("ASIA" + "ABCDEFGHIJKLMNOP creds", "ASIAABCDEFGHIJKLMNOP"),
    ("aws_secret_access_key=" + "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI"),
    ("gh " + "ghp_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "ghp_AbCdEf"),
    ("gho_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "gho_AbCdEf"),
    ("ghs_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "ghs_AbCdEf"),
    ("github_pat_" + "11ABCDEFG0123456789_AbCdEfGhIjKlMnOpQr", "github_pat_11ABC"),
    ("openai " + "sk-" + "AbCdEfGhIjKlMnOpQrStUvWx", "sk-AbCdEf"),
    ("sk-proj-" + "AbCdEfGhIjKlMnOpQrStUvWxYz_0123", "sk-proj-AbCd"),
    ("key=hunter2hunter2", "hunter2"),
    ("token=abcdef123", "abcdef123"),
    ("password=pa55w0rd!", "pa55w0rd"),
    ("secret=s3cr3t-value", "s3cr3t-value"),
    ("--api-key sekrit-value --lr 3", "sekrit-value"),
    ("--token=sekrit-value", "sekrit-value"),
    ('{"api_key": "sekrit-value", "loss": 0.1}', "sekrit-value"),
    ("Authorization: Bearer abcdefghijklmnop", "abcdefghijklmnop"),
    ("redis://user:hunter22@host:6379/0", "hunter22"),
]
ORDINARY = [
    "step=12 loss=0.123 grad_norm=0.88 lr=3e-4 tokens_per_s=12345 max_tokens=5",
    "{'loss': 2.31, 'learning_rate': 4.9e-05, 'epoch': 0.12}",
    "iter 120: loss 2.3100, time 101.23ms, mfu 35.12%",
    "saving checkpoint to /ckpt/607a30d783dfa663caf39e06633721c8d4cfcd7e/step_120.pt",
    "commit 607a30d783dfa663caf39e06633721c8d4cfcd7e on main",
    "loaded tokenizer from /hf/snapshots/607a30d783dfa663caf39e06633721c8d4cfcd7e",
    "KeyError: 'input_ids'",
    "risk-free sk-learn pipeline, hf_hub_download ok",
    "Traceback (most recent call last):",
]


@pytest.mark.parametrize(("line", "secret"), SHAPES)
def test_every_secret_shape_is_masked(line, secret):
    out = redact_text(line, secrets=[])
    assert secret not in out
    assert MASK in out


@pytest.mark.parametrize("line", ORDINARY)
def test_ordinary_lines_are_untouched(line):
    assert redact_text(line, secrets=[]) == line


def test_env_secrets_are_secret_names_and_token_shapes():
    env = {"WANDB_API_KEY": CLASSIC, "MY_DB_PASSWORD": "Zq8-unshaped-value", "HOME": "/home/u",
           "SOME_VAR": WANDB_V1, "DEBUG_TOKEN": "1", "PATH": "/usr/bin:/home/u/key:/bin"}  # fmt: skip
    assert sorted(env_secrets(env)) == sorted([CLASSIC, "Zq8-unshaped-value", WANDB_V1])


def test_user_text_that_looks_secret():
    assert looks_secret(WANDB_V1, secrets=[])
    assert looks_secret("exp01 " + "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123", secrets=[])
    assert not looks_secret("exp01 diverged after warmup", secrets=[])


def test_logging_filter_masks_messages_args_and_tracebacks():
    import logging

    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "launch failed: %s", (f"bad {WANDB_V1}",), None)
    try:
        raise RuntimeError(f"token={CLASSIC}")
    except RuntimeError:
        import sys

        record.exc_info = sys.exc_info()
    MaskingFilter(secrets=[]).filter(record)
    text = logging.Formatter().format(record)
    assert WANDB_V1 not in text and CLASSIC not in text and "launch failed: bad ***" in text

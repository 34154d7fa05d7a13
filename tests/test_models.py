"""The models by kind (transformer_course.training.kinds): every configuration has a type, and a wrong one is refused
with a message that names the key."""

import importlib

import pytest

from transformer_course.training.configs import CONFIGS
from transformer_course.training.kinds import BUILDERS, MODEL_CODE, SCHEMAS, build_model, config_keys, typed
from transformer_course.training.train import _parser, configuration


def test_every_model_kind_has_a_type_a_builder_and_its_code():
    # A new kind of model is added in one place each: its type, its builder and the modules of its cache key.
    kinds = {config["model"] for config in CONFIGS.values()}
    assert kinds == set(SCHEMAS) == set(BUILDERS) == set(MODEL_CODE)
    for modules in MODEL_CODE.values():
        for name in modules:
            importlib.import_module(f"transformer_course.{name}")


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_every_configuration_reads_as_its_type(name):
    cfg = typed(CONFIGS[name])
    assert type(cfg) is SCHEMAS[CONFIGS[name]["model"]]
    assert all(getattr(cfg, key) == value for key, value in CONFIGS[name].items())
    assert set(CONFIGS[name]) <= set(config_keys(cfg.model))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"d_emb": 32}, "not keys of the transformer configurations: d_emb"),
        ({"d_model": "wide"}, "d_model of a transformer configuration must be int, got 'wide'"),
        ({"dropout": None}, "dropout of a transformer configuration must be float, got None"),
        ({"norm_first": 1}, "norm_first of a transformer configuration must be bool, got 1"),
        ({"model": "lstm"}, "unknown model kind 'lstm'"),
    ],
)
def test_a_wrong_configuration_is_refused_by_name(change, message):
    with pytest.raises(ValueError, match=message):
        build_model({**CONFIGS["transformer-tiny"], **change}, 14)


def test_a_missing_key_is_named():
    config = {k: v for k, v in CONFIGS["bahdanau-tiny"].items() if k != "d_att"}
    with pytest.raises(ValueError, match="a bahdanau configuration needs d_att"):
        typed(config)


def test_optional_keys_take_their_defaults():
    cfg = typed({k: v for k, v in CONFIGS["bahdanau-tiny"].items() if k not in ("tie", "d_readout")})
    assert cfg.tie is False and cfg.d_readout is None and cfg.smoothing == 0.1 and cfg.vocab == 8000


def test_the_command_line_refuses_an_ill_typed_override():
    args = _parser().parse_args(["--config", "transformer-tiny", "--set", 'd_ff="wide"'])
    with pytest.raises(SystemExit, match="d_ff of a transformer configuration must be int"):
        configuration(args)

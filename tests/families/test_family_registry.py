"""Registering a family at run time (`hwnas.families.register_family`): it is found by name while
registered, gone after, and hwnas's own families can be neither replaced nor removed."""

from __future__ import annotations

import pytest

from family_runs import tiny_family_class

from hwnas.errors import InputError
from hwnas.families import (DEFAULT_FAMILY, family_names, get_family, register_family, registered_family,
                            unregister_family)


def test_a_registered_family_is_known_only_inside_the_block():
    cls = tiny_family_class()
    before = family_names()
    with registered_family(cls) as family:
        assert family_names() == (*before, cls.name) and get_family(cls.name) is family
        with pytest.raises(InputError, match="already registered"):
            register_family(cls)
    assert family_names() == before
    with pytest.raises(InputError, match=f"unknown family '{cls.name}'"):
        get_family(cls.name)
    with registered_family(cls) as again:  # one instance per class: caches keyed on it stay valid
        assert again is family


def test_hwnas_families_stay():
    own = type(get_family(DEFAULT_FAMILY))
    with pytest.raises(InputError, match="one of hwnas's own"):
        register_family(own)
    with pytest.raises(InputError, match="one of hwnas's own"):
        unregister_family(DEFAULT_FAMILY)
    with pytest.raises(InputError, match="not registered"):
        unregister_family("no-such-family")
    with pytest.raises(InputError, match="Family subclass"):
        register_family(object)

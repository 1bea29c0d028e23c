"""Checks that the game side of the installation works (run by ``setup_nethack.sh``).

``python -m rl_baseline.envs.check_setup`` prints each check and exits non-zero, with the
fix, at the first one that fails. It writes nothing into the Python installation.
"""
from __future__ import annotations

import sys


def _fail(what: str, fix: str) -> None:
    print(f"FAILED: {what}\n  fix: {fix}", file=sys.stderr)
    sys.exit(1)


def main() -> None:
    try:
        import nle  # lazy: optional; a failed NLE import is reported with its fix
        from nle import nethack  # lazy: optional, as nle above
    except Exception as exc:  # noqa: BLE001 - any import failure gets the same fix
        _fail(f"cannot import NLE ({exc})", "pip install -r requirements.txt (needs nle==1.0.0)")
    version = getattr(nle, "__version__", "?")
    print(f"ok: NLE {version} imports ({len(nethack.NETHACKOPTIONS)} default options)")
    if not str(version).startswith("1.0"):
        _fail(f"NLE {version} installed", "pip install nle==1.0.0 (the version this project is tested with)")

    from rl_baseline.envs.options import OPTIONS_FILE, OptionsFileError, read_options_file  # lazy: after the NLE check

    try:
        lines = read_options_file()
    except OptionsFileError as exc:
        _fail(str(exc), f"correct {OPTIONS_FILE}")
    print(f"ok: options file {OPTIONS_FILE} ({len(lines)} directives)")

    from rl_baseline.envs import EnvConfigError, make_monk_env  # lazy: imports NLE; after the NLE check

    try:
        env = make_monk_env(max_episode_steps=10)
    except (EnvConfigError, OptionsFileError) as exc:
        _fail(f"cannot build the environment ({exc})", f"check {OPTIONS_FILE}")
    # NetHack shows option errors on a "Hit return to continue" screen before the game
    # starts; look at the very first screen instead of letting NLE's reset retry.
    first = env.nethack.reset()
    screen = "\n".join(bytes(r).decode("latin-1") for r in first[env._tty_index])
    if "error in" in screen or "Unknown option" in screen or "Bad option" in screen:
        _fail("NetHack rejected the options file:\n" + screen.strip(), f"correct {OPTIONS_FILE}")
    obs, info = env.reset(seed=0)
    if "Monk" not in screen and "Candidate" not in "\n".join(
            bytes(r).decode("latin-1") for r in obs["tty_chars"]):
        _fail("the game did not start as a Monk", f"check the character options in {OPTIONS_FILE}")
    print(f"ok: a game starts (depth {info['depth']}, HP {info['hp']}/{info['hpmax']}, "
          f"{len(env.actions)} actions)")
    for _ in range(5):
        env.step(0)
    env.close()
    print("ok: the environment steps; NetHack set-up verified")

    from code_generation.isolation import IsolationUnavailable, require_isolation  # lazy: after the game's checks

    try:  # not a failure: a user may accept the risk with --trust_generated_code
        require_isolation()
        print("ok: generated code runs isolated (a bubblewrap sandbox starts)")
    except IsolationUnavailable as exc:
        print(f"WARNING: {exc}")


if __name__ == "__main__":
    main()

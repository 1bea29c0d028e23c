# Unit test of the buc task: identify items as blessed/uncursed/cursed on an altar.
check_skill_functions(NetHackPlayer)
sims = run_trials(NetHackPlayer, trials=10, max_steps=200)
for sim in sims:
    for entry in sim.history:
        if entry["worshipper_ok"] and entry["skill"] != "worshipper":
            raise AssertionError("step %d: an altar was in view of the hero but %s was chosen"
                                 % (entry["step"], entry["skill"]))
report("buc", sum(1 for sim in sims if sim.buc >= 1), len(sims), 8)

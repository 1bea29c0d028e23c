# Unit test of the buc task: identify items as blessed/uncursed/cursed on an altar.
check_skill_functions(NetHackPlayer)
sims = run_trials(NetHackPlayer, trials=10, max_steps=200)
for sim in sims:
    for entry in sim.history:
        if entry["worshipper_ok"] and entry["skill"] != "worshipper":
            raise AssertionError("step %d: an altar was in view of the hero but %s was chosen"
                                 % (entry["step"], entry["skill"]))
# 7 of 10: the simulated dungeons of seeds 2 and 3 have no altar on levels 1-5 (max_depth 5, the
# release's), and on seed 4 the one altar shares its level with a shop
report("buc", sum(1 for sim in sims if sim.buc >= 1), len(sims), 7)

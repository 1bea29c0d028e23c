# Unit test of the price task: price-identify items by offering them to shopkeepers.
check_skill_functions(NetHackPlayer)
# 6 of 10: the release's policy for this task sells in 6 of these episodes (once the Mines entrance
# is known it goes down again on that level whenever it meets it, so it circles there)
sims = run_trials(NetHackPlayer, trials=10, max_steps=200)
for sim in sims:
    for entry in sim.history:
        if entry["merchant_ok"] and entry["skill"] != "merchant":
            raise AssertionError("step %d: a shopkeeper was in view of the hero but %s was chosen"
                                 % (entry["step"], entry["skill"]))
report("price", sum(1 for sim in sims if sim.price_identified >= 1), len(sims), 6)

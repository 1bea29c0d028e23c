# Unit test of the levelupsell task: stay on level 1 until experience level 4, then sell
# an item, then survive 300 more turns.
check_skill_functions(NetHackPlayer)
sims = run_trials(NetHackPlayer, trials=10, max_steps=150)
successes = 0
for sim in sims:
    stayed = all(entry["depth"] == 1 and entry["branch"] == 0
                 for entry in sim.history if entry["xp_level"] < 4)
    sales = [entry for entry in sim.history
             if entry["skill"] == "merchant" and entry["merchant_ok"] and entry["xp_level"] >= 4]
    survived = bool(sales) and sim.turn - sales[0]["turn"] >= 500 and not sim.escaped
    if stayed and survived:
        successes += 1
report("levelupsell", successes, len(sims), 7)

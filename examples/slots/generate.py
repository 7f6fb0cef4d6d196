"""Write the synthetic slot-extraction example: 3 users x 5 sessions, gold slots, 3 example models.

Everything here is made up (SYNTHETIC): the people, the conversations, the "models", their
predictions, latencies and judge scores. The output is deterministic: running this script again
rewrites byte-identical files. Usage: ``python examples/slots/generate.py [OUT_DIR]``.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

SEED = 20260101
HERE = Path(__file__).resolve().parent

PROFILES: dict[str, dict[str, Any]] = {
    "u1": {
        "basic_info": {
            "name": ["Alice Chen"],
            "age": ["29"],
            "location": ["Seattle"],
            "occupation": ["Software Engineer"],
            "family": ["one younger brother"],
        },
        "interests": {
            "hobbies": ["hiking", "reading"],
            "music": ["jazz"],
            "food": ["Thai food"],
            "sports": ["bouldering"],
            "books": ["science fiction"],
        },
        "mental_state": {
            "mood": ["stressed", "anxious", "relieved", "content", "tired"],
            "stress_level": ["high", "high", "moderate", "low", "moderate"],
            "sleep": ["poor", "poor", "better", "good", "restless"],
            "worries": ["a product launch deadline"],
        },
    },
    "u2": {
        "basic_info": {
            "name": ["Marcus Okafor"],
            "age": ["41"],
            "location": ["Austin"],
            "occupation": ["high school history teacher"],
            "family": ["married", "two daughters"],
        },
        "interests": {
            "hobbies": ["chess", "gardening"],
            "music": ["classic soul"],
            "food": ["barbecue"],
            "sports": ["soccer"],
            "books": ["history podcasts"],
        },
        "mental_state": {
            "mood": ["cheerful", "frustrated", "calm", "worried", "optimistic"],
            "stress_level": ["low", "moderate", "low", "high", "low"],
            "sleep": ["good", "fine", "good", "poor", "good"],
            "worries": ["his daughter's exams"],
        },
    },
    "u3": {
        "basic_info": {
            "name": ["Priya Raman"],
            "age": ["35"],
            "location": ["Toronto"],
            "occupation": ["ICU nurse"],
            "family": ["lives with her partner"],
        },
        "interests": {
            "hobbies": ["painting", "yoga"],
            "music": ["Bollywood songs"],
            "food": ["baking bread"],
            "sports": ["badminton"],
            "books": ["mystery novels"],
        },
        "mental_state": {
            "mood": ["exhausted", "sad", "hopeful", "overwhelmed", "peaceful"],
            "stress_level": ["high", "high", "moderate", "high", "low"],
            "sleep": ["irregular", "poor", "okay", "poor", "good"],
            "worries": ["night shifts"],
        },
    },
}

# Which slots each session talks about: (topic, field).
SESSION_PLAN: dict[int, list[tuple[str, str]]] = {
    1: [
        ("basic_info", "name"),
        ("basic_info", "age"),
        ("basic_info", "location"),
        ("interests", "hobbies"),
        ("mental_state", "mood"),
    ],
    2: [
        ("basic_info", "occupation"),
        ("interests", "music"),
        ("mental_state", "mood"),
        ("mental_state", "stress_level"),
    ],
    3: [
        ("basic_info", "family"),
        ("interests", "food"),
        ("mental_state", "mood"),
        ("mental_state", "sleep"),
    ],
    4: [
        ("basic_info", "location"),
        ("interests", "sports"),
        ("mental_state", "mood"),
        ("mental_state", "stress_level"),
        ("mental_state", "worries"),
    ],
    5: [
        ("basic_info", "occupation"),
        ("interests", "books"),
        ("interests", "hobbies"),
        ("mental_state", "mood"),
        ("mental_state", "sleep"),
    ],
}

SAY = {
    "name": "Hi! My name is {v}.",
    "age": "I'm {v} years old, by the way.",
    "location": "I live in {v}.",
    "occupation": "I work as a {v}.",
    "family": "About family: {v}.",
    "hobbies": "In my free time I love {v}.",
    "music": "Lately I've been listening to a lot of {v}.",
    "food": "My comfort food is {v}.",
    "sports": "I've started doing {v} on weekends.",
    "books": "I'm really into {v} right now.",
    "mood": "Honestly, today I feel {v}.",
    "stress_level": "My stress level is {v} this week.",
    "sleep": "My sleep has been {v}.",
    "worries": "What keeps me up is {v}.",
}
ASSISTANT = [
    "Thanks for sharing that with me.",
    "That sounds meaningful. Tell me more?",
    "I appreciate you telling me. How does that affect your week?",
    "Got it. What else is on your mind?",
]

# Plausible-looking wrong values and hallucinated slots a weak model might produce.
WRONG = {
    "basic_info": ["Portland", "32", "data analyst", "no siblings", "Alicia Chen"],
    "interests": ["tennis", "rock music", "sushi", "poetry", "photography"],
    "mental_state": ["happy", "moderate", "great", "money"],
}
HALLUCINATED = {
    "basic_info": ("nickname", ["Ali"], ["Big M"]),
    "interests": ("dream_job", ["become a doctor", "help people"], ["surgeon"]),
    "mental_state": ("diagnosis", ["burnout"], ["mild depression"]),
}

MODELS: dict[str, dict[str, float]] = {
    # recall, share paraphrased, share wrong, extra slots per session, latency mean and sd (s)
    "synthetic-careful": {
        "recall": 0.9,
        "para": 0.25,
        "wrong": 0.08,
        "extras": 0.6,
        "lat": 350.0,
        "sd": 60.0,
    },
    "synthetic-fast": {
        "recall": 0.55,
        "para": 0.3,
        "wrong": 0.2,
        "extras": 0.8,
        "lat": 255.0,
        "sd": 35.0,
    },
    "synthetic-eager": {
        "recall": 0.75,
        "para": 0.4,
        "wrong": 0.25,
        "extras": 2.2,
        "lat": 460.0,
        "sd": 120.0,
    },
}


def gold_values(user: str, session: int, topic: str, field: str) -> list[str]:
    values: list[str] = PROFILES[user][topic][field]
    if topic == "mental_state" and field in ("mood", "stress_level", "sleep"):
        return [values[session - 1]]
    return list(values)


def paraphrase(values: list[str], rng: random.Random) -> list[str]:
    """A near miss: same content in another case/format, one value dropped, or extra words."""
    kind = rng.randrange(3)
    if kind == 0:
        return [v.upper() if rng.random() < 0.5 else v.lower() + "." for v in values]
    if kind == 1 and len(values) > 1:
        return values[:1]
    return [f"{values[0]} mostly", *values[1:]]


def build(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    conversations, gold = [], []
    for user in PROFILES:
        for session, plan in SESSION_PLAN.items():
            turns = []
            for i, (topic, field) in enumerate(plan):
                vals = gold_values(user, session, topic, field)
                turns.append({"role": "user", "content": SAY[field].format(v=" and ".join(vals))})
                turns.append(
                    {"role": "assistant", "content": ASSISTANT[(i + session) % len(ASSISTANT)]}
                )
                gold.append(
                    {
                        "user": user,
                        "session": session,
                        "topic": topic,
                        "field": field,
                        "values": vals,
                    }
                )
            conversations.append(
                {"user": user, "session": session, "synthetic": True, "turns": turns}
            )
    _write(out / "conversations.synthetic.jsonl", conversations)
    _write(out / "gold.synthetic.jsonl", gold)

    for model, p in MODELS.items():
        mrng = random.Random(f"{SEED}:{model}")
        preds, judges, latencies = [], [], []
        for user in PROFILES:
            for session, plan in SESSION_PLAN.items():
                for topic, field in plan:
                    vals = gold_values(user, session, topic, field)
                    if mrng.random() >= p["recall"]:
                        if mrng.random() < 0.3:  # an explicit "nothing found" line
                            preds.append(
                                {
                                    "user": user,
                                    "session": session,
                                    "topic": topic,
                                    "field": field,
                                    "values": [],
                                }
                            )
                        continue
                    roll = mrng.random()
                    if roll < p["wrong"]:
                        got, score = [mrng.choice(WRONG[topic])], round(mrng.uniform(0.0, 0.2), 2)
                    elif roll < p["wrong"] + p["para"]:
                        got, score = paraphrase(vals, mrng), round(mrng.uniform(0.6, 0.9), 2)
                    else:
                        got, score = list(vals), round(mrng.uniform(0.9, 1.0), 2)
                    preds.append(
                        {
                            "user": user,
                            "session": session,
                            "topic": topic,
                            "field": field,
                            "values": got,
                        }
                    )
                    judges.append(
                        {
                            "user": user,
                            "session": session,
                            "topic": topic,
                            "field": field,
                            "score": score,
                        }
                    )
                extras = int(p["extras"]) + (1 if mrng.random() < p["extras"] % 1 else 0)
                for topic in mrng.sample(sorted(HALLUCINATED), k=min(extras, len(HALLUCINATED))):
                    field, first, second = HALLUCINATED[topic]
                    preds.append(
                        {
                            "user": user,
                            "session": session,
                            "topic": topic,
                            "field": field,
                            "values": mrng.choice([first, second]),
                        }
                    )
                latencies.append(
                    {
                        "user": user,
                        "session": session,
                        "seconds": round(max(30.0, mrng.gauss(p["lat"], p["sd"])), 1),
                    }
                )
        _write(out / f"pred_{model}.synthetic.jsonl", preds)
        _write(out / f"judge_{model}.synthetic.jsonl", judges)
        _write(out / f"latency_{model}.synthetic.jsonl", latencies)


def _write(path: Path, rows: list[dict[str, Any]]) -> None:
    path.write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8"
    )


if __name__ == "__main__":
    build(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)

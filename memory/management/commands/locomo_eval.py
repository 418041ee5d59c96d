"""LoCoMo evidence recall@10 through the service code, beside simple baselines of the same run.

Each conversation is ingested by ``memory.services.weave_session`` (one owner per conversation,
one weave-session per LoCoMo session with its date, turn ids as event ids); every category 1-4
question with evidence is asked through ``memory.selectors.resonate_for`` as that owner. The
category label is used only to group the printed figures, never by retrieval. The dataset's own
summaries/observations/event annotations are never read.
"""

from __future__ import annotations

import json
import re
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone
from tqdm import tqdm

from memory import services
from memory.cache import get_cache
from memory.embedding import get_embedder
from memory.engine import BM25Index
from memory.engine.text import parse_datetime
from memory.engine.tokenize import tokenize
from memory.engine.weave import turn_text
from memory.models import MemorySession, Node
from memory.selectors import resonate_for
from teams import services as team_services
from teams.auth import actor_for_user
from teams.models import Organization

CATS = {1: "multi-hop", 2: "temporal", 3: "commonsense", 4: "single-hop"}
EVAL_ORG = "locomo-eval"


def load_conversations(path: Path) -> list[tuple[str, dict]]:
    files = sorted(path.glob("*.json")) if path.is_dir() else [path]
    out = []
    for f in files:
        data = json.loads(f.read_text())
        items = data if isinstance(data, list) else [data]  # locomo10.json is a list
        for i, item in enumerate(items):
            conv_id = item.get("sample_id") or (f.stem if len(items) == 1 else f"{f.stem}-{i}")
            out.append((str(conv_id), item))
    return out


def sessions_of(conv: dict) -> list[tuple[int, str, list[dict]]]:
    c = conv.get("conversation", conv)
    nums = sorted(int(m.group(1)) for k in c if (m := re.fullmatch(r"session_(\d+)", k)))
    return [(n, c.get(f"session_{n}_date_time", ""), c[f"session_{n}"]) for n in nums if c[f"session_{n}"]]


def evidence_ids(ev) -> list[str]:
    out = []
    for e in ev or []:
        out.extend(x for x in re.split(r"[;,\s]+", str(e)) if re.fullmatch(r"D\d+:\d+", x))
    return out


def rrf(lists: list[list[int]], k: int = 60, n: int = 10) -> list[int]:
    score: dict[int, float] = defaultdict(float)
    for lst in lists:
        for r, x in enumerate(lst, 1):
            score[x] += 1.0 / (k + r)
    return [x for x, _ in sorted(score.items(), key=lambda kv: -kv[1])[:n]]


class Recall:
    def __init__(self) -> None:
        self.by_cat: dict[int, list[bool]] = defaultdict(list)

    def add(self, cat: int, hit: bool) -> None:
        self.by_cat[cat].append(hit)

    def overall(self) -> float:
        allv = [h for v in self.by_cat.values() for h in v]
        return 100.0 * sum(allv) / max(1, len(allv))

    def cat(self, c: int) -> float:
        v = self.by_cat.get(c, [])
        return 100.0 * sum(v) / max(1, len(v))

    def as_dict(self) -> dict:
        return {"overall": round(self.overall(), 2),
                **{CATS[c]: round(self.cat(c), 2) for c in sorted(self.by_cat)},
                "n": sum(len(v) for v in self.by_cat.values())}


class Command(BaseCommand):
    help = "LoCoMo evidence recall@10 of resonate, with BM25 / dense / RRF baselines of the same run."

    def add_arguments(self, parser):
        parser.add_argument("--data", required=True, help="a folder of LoCoMo conversations or locomo10.json")
        parser.add_argument("--k", type=int, default=10)
        parser.add_argument("--out", default="", help="write the results as JSON here")
        parser.add_argument("--keep", action="store_true", help="keep the ingested eval org")
        parser.add_argument("--org", default=EVAL_ORG, help="slug of the (throw-away) eval organisation")
        parser.add_argument("--limit", type=int, default=0, help="only the first N conversations")
        parser.add_argument("--reuse", action="store_true",
                            help="reuse the eval org kept by an earlier --keep run (skips ingestion)")
        parser.add_argument("--no-baselines", action="store_true", help="skip the baseline lists (faster)")
        parser.add_argument("--abstract", action="store_true",
                            help="run session abstraction (the workers' service, heuristic without an LLM) "
                                 "after ingesting each conversation, so fact nodes join the graph")
        parser.add_argument("--set", action="append", default=[],
                            help="engine parameter override for ablations, e.g. --set depth=0")

    def handle(self, *args, data: str, k: int, out: str, keep: bool, limit: int, **opts):
        path = Path(data)
        if not path.exists():
            raise CommandError(f"{path} does not exist")
        # The dev database of a fresh clone has no tables until something migrates it (make run does).
        call_command("migrate", interactive=False, verbosity=0)
        overrides = {}
        for kv in opts["set"]:
            name, _, value = kv.partition("=")
            overrides[name] = json.loads(value) if value[:1] in "0123456789-[{tf" else value
        convs = load_conversations(path)[: limit or None]
        org_slug = opts["org"]
        # Retrieval is measured on what the write path stores synchronously; background work
        # (abstraction, conflicts) is not enqueued for a throw-away org no worker may ever serve.
        settings.NYLON_ENQUEUE_TASKS = False
        reuse = opts["reuse"] and Organization.objects.filter(slug=org_slug).exists()
        baselines = not opts["no_baselines"]
        User = get_user_model()
        if reuse:
            org = Organization.objects.get(slug=org_slug)
            keep = True
        else:
            Organization.objects.filter(slug=org_slug).delete()
            admin, _ = User.objects.get_or_create(username="locomo-eval-admin")
            org = team_services.organization_create(name="LoCoMo eval", slug=org_slug, owner=admin)
        get_cache().drop(org.id)

        results = {"variants": {}, "conversations": {}, "params": overrides}
        sys_recall = Recall()
        sys_leaf = Recall()
        sys_all = Recall()
        sys_seed = Recall()
        base = {name: Recall() for name in ("bm25", "dense", "rrf", "bm25_win", "dense_win", "rrf_win", "rrf_all4")}
        lat_total, lat_engine, lat_embed = [], [], []
        embedder = get_embedder()
        t_ingest = 0.0
        for conv_id, conv in convs:
            user, _ = User.objects.get_or_create(username=f"locomo-{conv_id}")
            from teams.models import Membership

            Membership.objects.get_or_create(org=org, user=user, defaults={"role": "member"})
            actor = actor_for_user(user, org)
            dia_node: dict[str, int] = {}
            turn_rows: list[tuple[int, str, str]] = []  # node id, text, window text
            t = time.perf_counter()
            if reuse:
                dia_node = dict(Node.objects.filter(org=org, owner_user=user).values_list("event_id", "id"))
            for n, date_s, turns in tqdm(sessions_of(conv), desc=f"ingest {conv_id}", leave=False):
                if reuse:
                    texts = [turn_text(tt.get("text", ""), tt.get("blip_caption")) for tt in turns]
                    for i, tt in enumerate(turns):
                        win = " ".join(texts[max(0, i - 1): i + 2])
                        turn_rows.append((dia_node[tt["dia_id"]], f"{tt.get('speaker', '')}: {texts[i]}", win))
                    continue
                when = parse_datetime(date_s)
                if when is not None and timezone.is_naive(when):
                    # LoCoMo stamps carry no zone; read them in the default zone, as the API does.
                    when = timezone.make_aware(when)
                ins = [services.TurnIn(text=tt.get("text", ""), speaker=tt.get("speaker", ""),
                                       occurred_at=when, event_id=tt["dia_id"],
                                       caption=tt.get("blip_caption") or "") for tt in turns]
                res = services.weave_session(actor=actor, turns=ins, session_key=f"{conv_id}:s{n}",
                                             end_session=True)
                dia_node.update(res.event_ids)
                if opts["abstract"]:
                    from reflection.services import abstract_session

                    sess = MemorySession.objects.get(org=org, owner_user=user, key=f"{conv_id}:s{n}")
                    abstract_session(session_id=sess.id)
                texts = [turn_text(tt.get("text", ""), tt.get("blip_caption")) for tt in turns]
                for i, tt in enumerate(turns):
                    win = " ".join(texts[max(0, i - 1): i + 2])
                    turn_rows.append((res.event_ids[tt["dia_id"]], f"{tt.get('speaker', '')}: {texts[i]}", win))
            t_ingest += time.perf_counter() - t
            get_cache().get(org.id)  # catch up before the first question

            # Baselines over this conversation's turns only.
            ids = np.array([r[0] for r in turn_rows])
            bm, bmw = BM25Index(), BM25Index()
            for i, (_, text, win) in enumerate(turn_rows):
                bm.add(i, tokenize(text))
                bmw.add(i, tokenize(win))
            emb = embedder.passages([r[1] for r in turn_rows]) if baselines else None
            embw = embedder.passages([r[2] for r in turn_rows]) if baselines else None

            conv_recall = Recall()
            for qa in conv.get("qa", []):
                cat = qa.get("category")
                ev = [dia_node[e] for e in evidence_ids(qa.get("evidence")) if e in dia_node]
                if cat not in CATS or not ev:
                    continue
                q = str(qa["question"])
                qvec = embedder.query(q)
                outcome = resonate_for(actor=actor, query=q, k=k, overrides=overrides, query_vec=qvec)
                t_e = time.perf_counter()
                embedder.query(q)  # timed separately so the latency figure includes a real embed
                lat_embed.append((time.perf_counter() - t_e) * 1000)
                lat_engine.append(outcome.result.elapsed_ms)
                lat_total.append(outcome.total_ms + lat_embed[-1])
                leaves_got = set(outcome.result.node_ids[:k])
                # A fact counts for a turn only if its provenance names that turn.
                facts = [h.node_id for h in outcome.result.hits[:k] if h.kind == 1]
                credited = {s for ids in Node.objects.filter(id__in=facts).values_list("source_node_ids", flat=True)
                            for s in ids} if facts else set()
                got = leaves_got | credited
                evs = set(ev)
                hit = bool(got & evs)
                sys_recall.add(cat, hit)
                sys_leaf.add(cat, bool(leaves_got & evs))
                conv_recall.add(cat, hit)
                sys_all.add(cat, evs <= got)
                sys_seed.add(cat, bool(set(outcome.result.seed_ids) & evs))

                if not baselines:
                    continue
                qt = tokenize(q)
                allow = np.ones(len(turn_rows), bool)
                l_bm = [int(ids[i]) for i in bm.search(qt, k, allow)[0]]
                l_bmw = [int(ids[i]) for i in bmw.search(qt, k, allow)[0]]
                l_d = [int(ids[i]) for i in np.argsort(-(emb @ qvec))[:k]] if emb is not None else []
                l_dw = [int(ids[i]) for i in np.argsort(-(embw @ qvec))[:k]] if embw is not None else []
                deep = 100
                l_bm_d = [int(ids[i]) for i in bm.search(qt, deep, allow)[0]]
                l_bmw_d = [int(ids[i]) for i in bmw.search(qt, deep, allow)[0]]
                l_d_d = [int(ids[i]) for i in np.argsort(-(emb @ qvec))[:deep]] if emb is not None else []
                l_dw_d = [int(ids[i]) for i in np.argsort(-(embw @ qvec))[:deep]] if embw is not None else []
                for name, lst in (("bm25", l_bm), ("dense", l_d), ("bm25_win", l_bmw), ("dense_win", l_dw),
                                  ("rrf", rrf([l_bm_d, l_d_d], n=k)), ("rrf_win", rrf([l_bmw_d, l_dw_d], n=k)),
                                  ("rrf_all4", rrf([l_bm_d, l_d_d, l_bmw_d, l_dw_d], n=k))):
                    base[name].add(cat, bool(set(lst) & evs))
            results["conversations"][conv_id] = conv_recall.as_dict()
            self.stdout.write(f"  {conv_id}: recall@{k} {conv_recall.overall():5.1f}%  "
                              f"({conv_recall.as_dict()['n']} questions)")

        def pct(xs, p):
            return float(np.percentile(xs, p)) if xs else 0.0

        results["variants"] = {"nylon": sys_recall.as_dict(), "nylon_leaf_only": sys_leaf.as_dict(),
                               "nylon_all_evidence": sys_all.as_dict(),
                               "nylon_seeds": sys_seed.as_dict(), **{n: r.as_dict() for n, r in base.items()}}
        results["latency_ms"] = {"p50": pct(lat_total, 50), "p95": pct(lat_total, 95),
                                 "engine_p50": pct(lat_engine, 50), "engine_p95": pct(lat_engine, 95),
                                 "embed_p50": pct(lat_embed, 50), "embed_p95": pct(lat_embed, 95)}
        results["ingest_s"] = round(t_ingest, 2)

        self.stdout.write("")
        header = f"{'variant':<22}{'overall':>9}" + "".join(f"{CATS[c]:>13}" for c in CATS) + f"{'n':>6}"
        self.stdout.write(header)
        for name, r in results["variants"].items():
            if not r["n"]:  # a baseline skipped by --no-baselines
                continue
            row = f"{name:<22}{r['overall']:>8.1f}%" + "".join(
                f"{r.get(CATS[c], 0):>12.1f}%" for c in CATS) + f"{r['n']:>6}"
            self.stdout.write(row)
        lat = results["latency_ms"]
        self.stdout.write(f"\nresonate latency: p50 {lat['p50']:.1f} ms, p95 {lat['p95']:.1f} ms "
                          f"(engine p95 {lat['engine_p95']:.1f} ms, query embed p95 {lat['embed_p95']:.1f} ms); "
                          f"ingest {t_ingest:.1f} s")
        n_facts = Node.objects.filter(org=org, kind="fact").count()
        self.stdout.write(f"fact nodes in the eval org: {n_facts} (credited only through their provenance; "
                          f"nylon_leaf_only counts evidence leaves alone)")
        self.stdout.write(f"recall@{k} = {sys_recall.overall():.1f}%")
        if out:
            Path(out).write_text(json.dumps(results, indent=2, default=str))
        if not keep:
            Organization.objects.filter(slug=org_slug).delete()
            get_cache().drop(org.id)

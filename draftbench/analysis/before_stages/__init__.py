"""Files measured before stages (in blocks with a confirmation, an adaptive race of that era, or upstream's
sequence): the rule they were measured under (:mod:`.rule`), their race's outcome (:mod:`.race`) and the
verdict's opening sentence from them (:mod:`.verdict`), kept apart so those files read as they did. A sweep
today is measured in stages and decided by :mod:`draftbench.analysis.decision`."""

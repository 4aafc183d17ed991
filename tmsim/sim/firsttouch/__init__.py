"""First touch by pages, the NUMA baseline as the operating system runs it: the memory plan's
pool in pages, each page on the tier it got when first touched (:mod:`.pages`), and the step
replayed with each operand's bytes split by its pages (:mod:`.replay`)."""

from tmsim.sim.firsttouch.pages import DEFAULT_PAGE_BYTES, PageMap, first_touch
from tmsim.sim.firsttouch.replay import PageTrace, replay_first_touch_pages

__all__ = ["DEFAULT_PAGE_BYTES", "PageMap", "PageTrace", "first_touch", "replay_first_touch_pages"]

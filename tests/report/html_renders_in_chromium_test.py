# Checks that every figure on the `dlscale report --html` page really loads in a browser: headless
# Chromium renders the page and each <img> must show, pixel for pixel, the PNG that the same report
# run wrote with --figures. The page needs no JavaScript and this check adds none: it appends only
# CSS that hides the text and stacks the page's own <img> elements at natural size from the top
# left, screenshots that, and compares each image's region with its PNG file. A broken image
# (Chromium's icon and alt text, or a partly decoded picture) does not match. To prove that, a
# deliberately corrupted PNG is added after the real ones and must be reported broken: if it
# passes, the check itself is broken. Then the widest page the sample studies give (GPU columns,
# a thread sweep, repeats) must fit a 1400-pixel window: a copy of it with a script added reports
# each table that would scroll sideways.
# Usage: python3 html_renders_in_chromium_test.py
import base64
import html
import html.parser
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile

try:
    import matplotlib.image
    import numpy as np
except ImportError as error:  # the test cannot run, so it must not pass
    print(f"FAIL: {sys.executable} cannot import {error.name}; install python3-matplotlib")
    sys.exit(1)

HERE = os.path.dirname(os.path.abspath(__file__))
REPORT = os.path.join(HERE, "..", "..", "report", "dlscale_report.py")
MAKE_SAMPLE = os.path.join(HERE, "make_sample_study.py")
DATA_PREFIX = "data:image/png;base64,"
# The figures of the sample study, in the order the page shows them.
FIGURES = ["efficiency", "throughput", "phases", "heatmap_run_001", "heatmap_run_002",
           "resources_run_000", "resources_run_001", "resources_run_002", "allreduce"]
# A pixel matches when every channel is within this of the PNG's (colour management and
# rounding move values by a step or two); an image loaded when almost all of its pixels match.
PIXEL_TOLERANCE = 8 / 255
MATCHING_FRACTION = 0.999
STACK_IMAGES_CSS = """<style>
body { margin: 0 !important; padding: 0 !important; max-width: none !important; }
h1, h2, h3, p, table, figcaption { display: none !important; }
section, div, figure { display: block !important; margin: 0 !important; padding: 0 !important; }
img { display: block !important; margin: 0 !important; border: 0 !important;
      width: auto !important; height: auto !important; max-width: none !important; }
</style>"""


class ImageSources(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.sources = []

    def handle_starttag(self, tag, attributes):
        if tag == "img":
            self.sources.append(dict(attributes).get("src", ""))


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def decode_png(data):
    return matplotlib.image.imread(io.BytesIO(data), format="png")[:, :, :3]  # figures are opaque


def screenshot(chromium, page, width, height, directory):
    shot = os.path.join(directory, "screenshot.png")
    command = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--force-device-scale-factor=1", "--force-color-profile=srgb",
               f"--user-data-dir={os.path.join(directory, 'profile')}",
               "--run-all-compositor-stages-before-draw", "--virtual-time-budget=10000",
               f"--window-size={width},{height}", f"--screenshot={shot}", f"file://{page}"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    if result.returncode != 0 or not os.path.exists(shot):
        fail(f"chromium failed ({result.returncode}):\n{result.stderr[-2000:]}")
    return matplotlib.image.imread(shot)[:, :, :3]


# Run in a copy of the page only: marks the body with each table box narrower than its table.
MEASURE_TABLES_SCRIPT = """<script>
document.body.setAttribute("data-scrolling-tables", Array.from(
    document.querySelectorAll("div.table")).filter(box => box.scrollWidth > box.clientWidth)
    .map(box => box.scrollWidth + " px in " + box.clientWidth).join("; "));
</script>"""
WINDOW_WIDTH = 1400


def tables_scrolling_sideways(chromium, directory):
    """What the widest sample page's tables need beyond a 1400-pixel window: '' when they fit."""
    sample = os.path.join(directory, "wide.h5")
    page = os.path.join(directory, "wide.html")
    subprocess.run([sys.executable, MAKE_SAMPLE, sample, "--gpu", "--threads", "1,2",
                    "--repeats", "2"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([sys.executable, REPORT, sample, "--html", page], check=True,
                   stdout=subprocess.DEVNULL)
    probe = os.path.join(directory, "measure.html")
    with open(page, encoding="utf-8") as source, open(probe, "w", encoding="utf-8") as target:
        target.write(source.read().replace("</body>", MEASURE_TABLES_SCRIPT + "</body>", 1))
    command = [chromium, "--headless", "--no-sandbox", "--disable-gpu",
               f"--user-data-dir={os.path.join(directory, 'measure-profile')}",
               f"--window-size={WINDOW_WIDTH},900", "--dump-dom", f"file://{probe}"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    found = re.search(r'data-scrolling-tables="([^"]*)"', result.stdout)
    if result.returncode != 0 or found is None:
        fail(f"chromium could not measure the tables ({result.returncode}):\n"
             f"{result.stderr[-2000:]}")
    return html.unescape(found.group(1))


def matching_fraction(shot, expected, top):
    height, width = expected.shape[:2]
    region = shot[top:top + height, :width]
    if region.shape != expected.shape:
        return 0.0
    return float(np.mean(np.all(np.abs(region - expected) <= PIXEL_TOLERANCE, axis=2)))


def main():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("SKIP: chromium is not installed (scripts/install-dependencies.sh installs it as root)")
        return 77
    with tempfile.TemporaryDirectory(prefix="dlscale-report-chromium-") as directory:
        sample = os.path.join(directory, "sweep.h5")
        page = os.path.join(directory, "report.html")
        figure_directory = os.path.join(directory, "figures")
        os.mkdir(figure_directory)
        subprocess.run([sys.executable, MAKE_SAMPLE, sample, "--predicted-efficiency"],
                       check=True)
        subprocess.run([sys.executable, REPORT, sample, "--html", page,
                        "--figures", figure_directory], check=True, stdout=subprocess.DEVNULL)
        with open(page, encoding="utf-8") as handle:
            text = handle.read()
        parser = ImageSources()
        parser.feed(text)
        if len(parser.sources) != len(FIGURES) or \
                not all(s.startswith(DATA_PREFIX) for s in parser.sources):
            fail(f"expected {len(FIGURES)} embedded PNG images, found {len(parser.sources)}: "
                 f"{[s[:40] for s in parser.sources]}")
        pngs = []
        for stem in FIGURES:
            with open(os.path.join(figure_directory, f"{stem}.png"), "rb") as handle:
                pngs.append(handle.read())

        # The control: the first figure with bytes in its image data overwritten. It goes last,
        # so that however Chromium draws it, the real images above keep their places.
        broken = bytearray(pngs[0])
        broken[len(broken) // 3: len(broken) // 3 + 64] = b"\xff" * 64
        broken_tag = f'<img src="{DATA_PREFIX}{base64.b64encode(broken).decode()}" alt="broken">'
        probe = os.path.join(directory, "probe.html")
        with open(probe, "w", encoding="utf-8") as handle:
            handle.write(text.replace("</head>", STACK_IMAGES_CSS + "</head>", 1)
                         .replace("</body>", broken_tag + "</body>", 1))

        expected = [decode_png(png) for png in pngs] + [decode_png(pngs[0])]
        width = max(e.shape[1] for e in expected)
        height = sum(e.shape[0] for e in expected)
        shot = screenshot(chromium, probe, width, height, directory)

        top, failures = 0, []
        for index, pixels in enumerate(expected):
            fraction = matching_fraction(shot, pixels, top)
            is_control = index == len(pngs)
            name = "control (corrupted)" if is_control else FIGURES[index]
            print(f"{name}: "
                  f"{pixels.shape[1]}x{pixels.shape[0]}, {fraction:.2%} of pixels match")
            if is_control and fraction >= MATCHING_FRACTION:
                failures.append("the corrupted control image passed: the check cannot see "
                                "broken images")
            if not is_control and fraction < MATCHING_FRACTION:
                failures.append(f"{name} did not load ({fraction:.2%} of pixels match)")
            top += pixels.shape[0]
        if failures:
            fail("; ".join(failures))
        scrolling = tables_scrolling_sideways(chromium, directory)
        if scrolling:
            fail(f"tables scroll sideways in a {WINDOW_WIDTH}-pixel window: {scrolling}")
    print(f"OK: all {len(pngs)} figures on the report page load in Chromium, and its widest "
          f"tables fit a {WINDOW_WIDTH}-pixel window")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Opens the built site in headless Chromium and checks what a reader sees.

Usage: check_site.py HTML_DIR SCREENSHOT_DIR

The site is served on a loopback port (as a reader's local web server would serve it; file://
URLs would forbid the formula fonts). For the front page and one page of each kind (a tutorial,
a how-to guide, a reference page, an explanation) it checks:
- the page has its title, the navigation sidebar with a link to every section, and the search
  box;
- every image has loaded (naturalWidth > 0), and the formulas were typeset where the page has
  any;
- the browser's console holds no error (a missing script, stylesheet or image, a JavaScript
  exception);
and the search page answers a query with results. A screenshot of each page goes to
SCREENSHOT_DIR. Exit status 1 with every failure listed.
"""
import functools
import http.server
import sys
import threading
import time
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

PAGES = {
    "front page": "index.html",
    "tutorial": "tutorials/first-alignment-python.html",
    "how-to guide": "howto/choose-a-method.html",
    "reference": "reference/python-api.html",
    "explanation": "explanation/methods.html",
}
SECTIONS = ["Tutorials", "How-to guides", "Reference", "Explanation"]


def browser():
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,900",
                "--disable-dev-shm-usage"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def serve(root):
    """An HTTP server for ROOT on 127.0.0.1 (any free port), in a thread; returns (server, url)."""
    handler = functools.partial(QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def check_page(driver, root, url, kind, rel, shots, failures):
    if not (root / rel).exists():
        failures.append(f"{kind}: {rel} was not built")
        return
    driver.get(url + rel)
    time.sleep(0.3)
    title = driver.title
    if not title or "dcalign" not in title:
        failures.append(f"{kind} ({rel}): title {title!r} does not name dcalign")
    nav = driver.find_elements(By.CSS_SELECTOR, ".sidebar-tree a.reference")
    texts = {a.get_attribute("textContent").strip() for a in nav}
    missing = [s for s in SECTIONS if s not in texts]
    if missing:
        failures.append(f"{kind} ({rel}): the navigation lacks {missing}")
    if not driver.find_elements(By.CSS_SELECTOR, "form.sidebar-search-container input[name=q]"):
        failures.append(f"{kind} ({rel}): no search box")
    broken = driver.execute_script(
        "return Array.from(document.images)"
        ".filter(i => !i.complete || i.naturalWidth === 0).map(i => i.src);"
    )
    if broken:
        failures.append(f"{kind} ({rel}): images not loaded: {broken}")
    formulas = len(driver.find_elements(By.CSS_SELECTOR, "span.math, div.math"))
    if formulas:
        deadline = time.time() + 10
        typeset = 0
        while time.time() < deadline:
            typeset = len(driver.find_elements(By.CSS_SELECTOR, ".MJXc-display, .mjx-chtml"))
            if typeset:
                break
            time.sleep(0.2)
        if not typeset:
            failures.append(f"{kind} ({rel}): {formulas} formulas, none typeset by MathJax")
    for entry in driver.get_log("browser"):
        if entry.get("level") == "SEVERE":
            failures.append(f"{kind} ({rel}): console error: {entry.get('message')}")
    shots.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(shots / (rel.replace("/", "__").replace(".html", ".png"))))
    print(f"check_site: {kind}: {rel}: {title!r}, {len(nav)} navigation links, "
          f"{formulas} formulas")


def check_search(driver, url, shots, failures):
    driver.get(url + "search.html?q=Procrustes")
    deadline = time.time() + 10
    results = []
    while time.time() < deadline:
        results = driver.find_elements(By.CSS_SELECTOR, "#search-results ul.search li")
        if results:
            break
        time.sleep(0.2)
    if not results:
        failures.append("search: the query 'Procrustes' found no page")
    for entry in driver.get_log("browser"):
        if entry.get("level") == "SEVERE":
            failures.append(f"search: console error: {entry.get('message')}")
    driver.save_screenshot(str(shots / "search.png"))
    print(f"check_site: search 'Procrustes': {len(results)} results")


def main():
    root = Path(sys.argv[1]).resolve()
    shots = Path(sys.argv[2]).resolve()
    failures = []
    server, url = serve(root)
    driver = browser()
    try:
        for kind, rel in PAGES.items():
            check_page(driver, root, url, kind, rel, shots, failures)
        check_search(driver, url, shots, failures)
    finally:
        driver.quit()
        server.shutdown()
    for f in failures:
        print(f"check_site: FAILED: {f}", file=sys.stderr)
    print(f"check_site: screenshots in {shots}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

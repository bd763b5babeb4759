"""One module per koordlet runtime hook; each exports pure ``pod``/``container`` functions."""

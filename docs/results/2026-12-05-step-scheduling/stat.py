import time, sys
out = open(sys.argv[1], "w")
while True:
    with open("/proc/stat") as f:
        line = f.readline()
    out.write("%.3f %s" % (time.time(), line)); out.flush()
    time.sleep(0.1)

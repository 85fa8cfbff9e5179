"""Usage: voc_map.py LIST NAMES RESULTS

An independent VOC mAP@0.5 of a detector's results, for
test_map_command.sh to check `darknet selsync map` against; plain python3.

LIST: the held-out images, one path a line (PNGs; their ground truths in
Darknet's layout: labels/NAME.txt beside images/NAME.png, a line
"class cx cy w h" a box, relative to the image size).
NAMES: the class names, one a line (Darknet's names= file).
RESULTS: the directory `darknet detector valid` wrote for them
(comp4_det_test_NAME.txt a class, lines "image_id score xmin ymin xmax ymax"
in pixels, shifted by +1 and clipped to [1, width] x [1, height] by
print_detector_detections).

Per class: the detections sorted by descending score (a stable sort, so
ties keep the file's order: image, then Darknet's order after NMS, as
`selsync map` keeps them); each is a true positive when the ground-truth box
of its class in its image that it overlaps most has IoU >= 0.5 and is not
yet taken (it is then taken), else a false positive, as the VOC devkit's
VOCevaldet.m decides; precision is made monotone from the right and AP is
the area under the precision/recall steps over all recall points (VOC2010
and later). IoU of continuous boxes (no +1 on widths, unlike the devkit's
pixel convention), as Darknet's boxes are continuous. mAP: the mean over
the classes with at least one ground-truth box (a class without any
detection counts 0).

Prints "class C: AP@0.5 = X" for those classes and "mAP@0.5 = X" (6
decimals)."""
import os
import struct
import sys


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        sys.exit("%s: not a PNG" % path)
    return struct.unpack(">II", head[16:24])


def label_path(image):
    folder, name = os.path.split(image)
    return os.path.join(os.path.dirname(folder), "labels", os.path.splitext(name)[0] + ".txt")


def iou(a, b):
    """a, b: (x1, y1, x2, y2)."""
    iw = min(a[2], b[2]) - max(a[0], b[0])
    ih = min(a[3], b[3]) - max(a[1], b[1])
    if iw <= 0 or ih <= 0:
        return 0.0
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def average_precision(tp, npos):
    """tp: 1/0 per detection in descending score order."""
    rec, prec = [], []
    hits = 0
    for k, t in enumerate(tp):
        hits += t
        rec.append(hits / npos)
        prec.append(hits / (k + 1))
    mrec = [0.0] + rec + [1.0]
    mpre = [0.0] + prec + [0.0]
    for i in range(len(mpre) - 2, -1, -1):
        mpre[i] = max(mpre[i], mpre[i + 1])
    return sum((mrec[i] - mrec[i - 1]) * mpre[i] for i in range(1, len(mrec)) if mrec[i] != mrec[i - 1])


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    list_file, names_file, results = sys.argv[1:]
    images = [l.strip() for l in open(list_file) if l.strip()]
    names = [l.strip() for l in open(names_file) if l.strip()]
    # ground truths: truth[(class, image id)] = list of boxes in pixels
    truth, npos, ids = {}, [0] * len(names), set()
    for path in images:
        image_id = os.path.basename(path).split(".")[0]  # Darknet's basecfg()
        if image_id in ids:
            sys.exit("%s: image id %s twice" % (list_file, image_id))
        ids.add(image_id)
        width, height = png_size(path)
        for line in open(label_path(path)):
            if not line.split():
                continue
            c, cx, cy, w, h = line.split()
            c = int(c)
            cx, w = float(cx) * width, float(w) * width
            cy, h = float(cy) * height, float(h) * height
            truth.setdefault((c, image_id), []).append((cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2))
            npos[c] += 1
    aps = []
    for c, name in enumerate(names):
        dets = []
        for line in open(os.path.join(results, "comp4_det_test_%s.txt" % name)):
            image_id, score, x1, y1, x2, y2 = line.split()
            if image_id not in ids:
                sys.exit("%s: unknown image %s" % (name, image_id))
            # undo print_detector_detections' +1
            dets.append((float(score), image_id, (float(x1) - 1, float(y1) - 1, float(x2) - 1, float(y2) - 1)))
        if npos[c] == 0:
            continue
        dets.sort(key=lambda d: -d[0])
        taken = set()
        tp = []
        for score, image_id, box in dets:
            boxes = truth.get((c, image_id), [])
            best, best_iou = None, -1.0
            for j, t in enumerate(boxes):
                o = iou(box, t)
                if o > best_iou:
                    best, best_iou = j, o
            hit = best is not None and best_iou >= 0.5 and (image_id, best) not in taken
            if hit:
                taken.add((image_id, best))
            tp.append(1 if hit else 0)
        ap = average_precision(tp, npos[c])
        aps.append(ap)
        print("class %d: AP@0.5 = %.6f" % (c, ap))
    if not aps:
        sys.exit("no ground-truth box")
    print("mAP@0.5 = %.6f" % (sum(aps) / len(aps)))


if __name__ == "__main__":
    main()

# idiom: TfidfVectorizer fitted straight on train['animal_name'] without filling the missing names, LinearSVC wrapped in CalibratedClassifierCV for probabilities; intended: crash (ValueError: np.nan is an invalid document)
import pandas as pd
from sklearn.calibration import CalibratedClassifierCV
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.svm import LinearSVC

train = pd.read_csv("data/train.csv")
test = pd.read_csv("data/test.csv")

tfidf = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 4), lowercase=True)
X = tfidf.fit_transform(train["animal_name"])
X_test = tfidf.transform(test["animal_name"])

svm = CalibratedClassifierCV(LinearSVC(C=0.3), method="sigmoid", cv=5)
svm.fit(X, train["species"])
dog = list(svm.classes_).index("Dog")
pd.DataFrame({"id": test["id"], "species": svm.predict_proba(X_test)[:, dog]}).to_csv("submission.csv", index=False)
